#!/usr/bin/env bash
# 2026-12-03 (twentieth session), fourth call: the FP8 kernels with K/V stages released by every consumer warp
# (Fp8Barriers: four arrivals per warpgroup) instead of each warpgroup's thread 0, after s20c put warp 0 60-120
# clocks per key block behind its warpgroup (the releases and the producer's scheduler). (1) Every FP8 GPU test on
# the new build. (2) The per-warp trace, new (build/fp8_trace) against the build before (build/fp8_trace_before),
# 16k non-causal and 4k causal. (3) Kernel-only A/B of every head dim's default, new against before
# (build/before/libfa3nn_hopper.so: the same default kernels as 26b1719, SASS-identical), 5 balanced rounds.
# Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s20d
export FA3NN_TRITON_AUTOTUNE=0
stamp tests
gpu_pytest tests_fp8.log 200 tests/ -k "fp8 or FP8"
grep -E "^(FAILED|ERROR)" "$out/tests_fp8.log" | head -n 10
stamp trace
for bin in fp8_trace_before fp8_trace; do
    for args in "16384 0 0" "4096 1 0"; do
        log="$out/${bin}_${args// /_}.log"
        timeout 60 build/$bin $args > "$log" 2>&1
        echo "$bin $args rc $?"; grep -E "TFLOP" "$log"; sed -n '/^spread/,$p' "$log"
        grep -E "^  wg [01]:" "$log" | sed -E 's/K\/V wait [0-9]+ \| turn wait [0-9]+ \| //; s/ \(of Q.*//'
    done
done
stamp ab
gpu_fp8_bench ab 240 --headdims 64 128 256 --seqlens 1024 2048 4096 8192 16384 --block-k 256 --reps 5 \
    --variants --compare before=build/before/libfa3nn_hopper.so
stamp done
gpu_archive s20d.tar.gz
