#!/usr/bin/env bash
# 2026-12-02 eleventh session: every FP8 GPU test on the build with 256-key blocks from 257 keys (SHORT_KEYS 256) and
# variant key_block_256_split_s (Q K^T in two key halves, the first half's mask and row max under the second half's
# GEMM), then kernel-only timing of the default (256-key) against split_s, K/V tiles of 768. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-splits
stamp tests
gpu_pytest tests_fp8.log 200 tests/ -k "fp8 or FP8"
grep -E "^(FAILED|ERROR)" "$out/tests_fp8.log" | head -12
stamp bench
timeout 200 python3 scripts/bench_hopper_fp8.py --json "$out/fp8_d128.json" --headdims 128 \
    --seqlens 512 1024 2048 4096 8192 16384 --reps 10 --iters 10 --block-k 768 \
    --variants key_block_256_fused_turn key_block_256_split_s > "$out/fp8_d128.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8_d128.log"
stamp done
