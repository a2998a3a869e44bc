#!/usr/bin/env bash
# 2026-12-04 (twenty-fifth session): where a causal tile's time goes in the FP8 d128 default: benchmarks/micro/
# fp8_trace.cu (built here with -DFA3NN_FP8_TRACE into build/fp8_trace) now also prints CTA 0's tiles of the
# cross-tile chain with a fit clocks = a + b * key blocks. Causal 2k / 4k / 8k, non-causal 4k. Carry build.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$out/gpu_state.txt" 2>&1
for args in "4096 1 0" "4096 1 0 1" "2048 1 0 1" "8192 1 0 1" "4096 0 0 1"; do
    echo "== fp8_trace $args"
    timeout 60 build/fp8_trace $args 2>&1 | grep -E "TFLOP/s|fit over|tile-end turn|phase clocks|  wg [01]: K" 
done | tee "$out/trace.log"
