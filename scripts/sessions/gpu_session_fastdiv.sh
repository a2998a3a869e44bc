#!/usr/bin/env bash
# Prepared 2026-12-01 (fifth session, branch fastdiv), not yet run: the persistent scheduler's divisions as FastDiv
# multiply-highs from the host-built TileDeal (kernels/hopper/fast_div.cuh, scheduler.cuh). ncu of d64 causal 512
# counted ~150k runtime int divisions per call (~25 instructions each, ~6% of its 58.4M); the d64 short causal kernel
# goes from 14 runtime division sites to 0 (3440 -> 3280 static SASS instructions; the whole library 949 -> 0 sites,
# 350.9k -> 325.0k instructions). Predicted: +2-5%
# at 512-1024 (most at causal, d64), within noise past 4k. (1) the forward and FP8 GPU suites on this build;
# (2) bench_hopper against main's build (carried as build/base/libfa3nn_hopper.so, built from main), d64/d128/d256,
# 512-16384; (3) the FP8 forward, kernel only, against the same base.
# Carry build/libfa3nn_hopper.so (this branch) and build/base/libfa3nn_hopper.so (main).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fastdiv
stamp tests
gpu_pytest tests_hopper.log 200 tests/test_hopper.py tests/test_hopper_fp8.py
stamp bench
timeout 300 python3 scripts/bench_hopper.py --json "$out/fastdiv.json" --headdims 64 128 256 \
    --seqlens 512 1024 2048 4096 16384 --compare base=build/base/libfa3nn_hopper.so --ablation-seqlens \
    > "$out/fastdiv.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fastdiv.log" | grep -E "^\| [0-9]" | cut -d'|' -f2-8
stamp fp8
timeout 150 python3 scripts/bench_hopper_fp8.py --json "$out/fastdiv_fp8.json" --headdims 128 256 \
    --seqlens 2048 16384 --compare base=build/base/libfa3nn_hopper.so > "$out/fastdiv_fp8.log" 2>&1
echo "fp8 rc $?"; sed -n '/^| hdim/,$p' "$out/fastdiv_fp8.log"
gpu_archive fastdiv.tgz
stamp done
