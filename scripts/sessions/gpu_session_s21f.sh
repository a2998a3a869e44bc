#!/usr/bin/env bash
# 2026-12-03 (twenty-first session): the clock64 trace of d128's new FP8 default (row sums from the P V GEMM,
# variant 0 = 45) against the one before (37), 16k non-causal and 4k causal: where the period went.
# build/fp8_trace compiled here with FA3NN_FP8_TRACE; carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s21f
for args in "16384 0 0" "16384 0 37" "4096 1 0" "4096 1 37"; do
    log="$out/trace_${args// /_}.log"
    timeout 60 build/fp8_trace $args > "$log" 2>&1
    echo "trace $args rc $?"; grep -E "TFLOP" "$log"
    grep -E "^  wg [01]:" "$log" | sed -E 's/ \(of Q.*//'
done
stamp done
