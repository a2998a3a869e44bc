#!/usr/bin/env bash
# Prepared 2026-12-01 (fourth session), not yet run: forward variant 7 (causal tiles in one-(batch, head) L2
# sections dealt boustrophedon; simulated max / mean SM work 1.03 against today's 1.05-1.10 at d128 causal
# 512-8192 and 1.07-1.25 at d256 causal 512-4096, and L2 sections at d64 causal <= 4096 at 1.03-1.06,
# scripts/simulate_causal_balance.py). (1) its GPU test (bitwise
# equal to the default) and the native forward and FP8 suites; (2) bench_hopper, default and variant 7 beside cuDNN at
# the sectioned shapes (the non-causal rows run the same kernels twice: a noise check); (3) the FP8 forward's
# variant 19 (the same deal) against its default, kernel only. Carry build/libfa3nn_hopper.so.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-onepair
stamp tests
gpu_pytest tests_hopper.log 200 tests/test_hopper.py tests/test_hopper_fp8.py
stamp bench
timeout 300 python3 scripts/bench_hopper.py --json "$out/onepair.json" --headdims 64 128 256 \
    --seqlens 512 1024 2048 4096 8192 --variants full one_pair_sections --ablation-seqlens > "$out/onepair.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/onepair.log" | grep -E "yes|hdim"
stamp fp8
timeout 200 python3 scripts/bench_hopper_fp8.py --json "$out/onepair_fp8.json" --headdims 128 256 \
    --seqlens 2048 4096 --block-k 384 --variants one_pair_sections > "$out/onepair_fp8.log" 2>&1
echo "fp8 rc $?"; sed -n '/^| hdim/,$p' "$out/onepair_fp8.log"
stamp done
