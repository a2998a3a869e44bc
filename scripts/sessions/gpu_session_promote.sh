#!/usr/bin/env bash
# 2026-12-01 seventh session: the FP8 forward with each key block's P V promoted into fp32 O (native d64/d128 on
# 128-key blocks, Triton at every head dim). The FP8 GPU suites, the mean-of-V drift (scripts/
# fp8_accumulation_bias.py) for the new default against no_promotion and the old 192-key default, then kernel-only
# timing of the same three and the sustained 16k rates. Carry build/libfa3nn_hopper.so.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-promote
stamp tests
gpu_pytest tests_fp8.log 150 tests/test_hopper_fp8.py tests/test_fp8_triton_gpu.py tests/test_fp8_api.py
stamp bias
timeout 150 python3 scripts/fp8_accumulation_bias.py --json "$out/bias.json" \
    --variants full no_promotion key_block_192 > "$out/bias.log" 2>&1
echo "bias rc $?"; grep "^|" "$out/bias.log"
stamp bench
timeout 200 python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 \
    --seqlens 1024 2048 4096 8192 16384 --reps 8 --iters 10 --block-k 384 \
    --variants no_promotion key_block_192 > "$out/fp8.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"
stamp clocks
timeout 100 python3 scripts/clock_probe.py --json "$out/clocks.json" --headdim 128 --block-k 384 --fp8-variants \
    key_block_192 --kernels fp8 fp8_key_block_192 > "$out/clocks.log" 2>&1
echo "clocks rc $?"; sed -n '/^| kernel/,$p' "$out/clocks.log"
stamp done
gpu_archive promote.tgz
