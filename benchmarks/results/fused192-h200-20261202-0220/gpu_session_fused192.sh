#!/usr/bin/env bash
# (The call that produced this folder, run from scripts/ at 02:20 UTC and kept here as its record;
# scripts/gpu_session_fp8variants.sh is the general form.)
# 2026-12-02 ninth session: the fused turn at d64 (variant fused_turn, 0 spills, in the default build) and on 192-key
# blocks at d128 (key_block_192_fused_turn: one 64-register block accumulator; _split: P V in two n64 halves; both
# spill, 20-28 B / 56-84 B, so only an experiment build has them: carry build/libfa3nn_hopper.so built with
# `python -m fa3nn.backends.hopper_build --out build/libfa3nn_hopper.so --define FA3NN_FP8_EXPERIMENTS`).
# Tests (exact scores, drift), then kernel-only timing: d64 default (serial) vs fused_turn; d128 default (fused
# turn, 128-key) vs the 192-key fused forms and the unpromoted 192-key kernel (block_k 384 serves every block).
# Prediction: d64 fused +10-20% over serial (the d128 step was +10-13%); 192-key fused +5-15% over the 128-key one
# from 4k on, if the spills sit outside the loop (the unpromoted 192-key kernel gained +8-19% over 128-key).
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-fused192
stamp tests
gpu_pytest tests_fused.log 150 tests/test_hopper_fp8.py -k "fused_turn"
grep -E "^(FAILED|ERROR|SKIPPED)" "$out/tests_fused.log" | head -12
stamp bench
timeout 150 python3 scripts/bench_hopper_fp8.py --json "$out/fp8_d64.json" --headdims 64 \
    --seqlens 1024 4096 16384 --reps 8 --iters 10 --variants fused_turn > "$out/fp8_d64.log" 2>&1
echo "d64 rc $?"; sed -n '/^| hdim/,$p' "$out/fp8_d64.log"
timeout 240 python3 scripts/bench_hopper_fp8.py --json "$out/fp8_d128.json" --headdims 128 \
    --seqlens 1024 2048 4096 8192 16384 --reps 8 --iters 10 --block-k 384 \
    --variants key_block_192_fused_turn key_block_192_fused_turn_split key_block_192 > "$out/fp8_d128.log" 2>&1
echo "d128 rc $?"; sed -n '/^| hdim/,$p' "$out/fp8_d128.log"
stamp done
