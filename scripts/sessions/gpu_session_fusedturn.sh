#!/usr/bin/env bash
# Prepared 2026-12-01 eighth session (no GPU time left), for the next session: variant fused_turn (d128, 128-key
# blocks, promoted: one pingpong turn per block holding P V of block
# n-1, its FFMA into O and Q K^T of block n; the serial steps take two turns per block, which leaves both warpgroups
# in their softmax at once). Their exact-score and drift tests, then kernel-only timing against the default (192-key
# serial), serial (128-key) and the unpromoted 192-key kernel, and sustained 16k clocks. Prediction (a turn model,
# NOTES): +5-15% over serial (128-key), which would put it at or past the 192-key default from 4k on.
# Carry build/libfa3nn_hopper.so.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fusedturn
stamp tests
gpu_pytest tests_fused.log 150 tests/test_hopper_fp8.py -k "fused_turn"
grep -E "^(FAILED|ERROR)" "$out/tests_fused.log" | head -12
stamp bench
timeout 220 python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 \
    --seqlens 1024 2048 4096 8192 16384 --reps 8 --iters 10 --block-k 384 \
    --variants fused_turn serial key_block_192 > "$out/fp8.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"
stamp clocks
timeout 120 python3 scripts/clock_probe.py --json "$out/clocks.json" --headdim 128 --block-k 384 --fp8-variants \
    fused_turn serial --kernels fp8 fp8_fused_turn fp8_serial > "$out/clocks.log" 2>&1
echo "clocks rc $?"; sed -n '/^| kernel/,$p' "$out/clocks.log"
stamp done
