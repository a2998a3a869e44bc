#!/usr/bin/env bash
# 2026-12-03 (twenty-first session): why the trace (s21f, +2.9% period) and the A/B (s21d, +8-10% at 16k) disagree
# on the row-sum default: both harness builds (build/fp8_trace with the clock64 trace, build/fp8_notrace without),
# the default (0 = 45) and 37, the harness's inputs and its wide ones (scores of unit spread, as randn gives).
# Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s21g
for wide in 0 1; do
    for args in "16384 0" "4096 1"; do
        for v in 0 37; do
            timeout 60 build/fp8_notrace $args $v $wide 2>&1 | grep TFLOP
        done
    done
done
for v in 0 37; do
    log="$out/trace_wide_$v.log"
    timeout 60 build/fp8_trace 16384 0 $v 1 > "$log" 2>&1
    grep -E "TFLOP" "$log"; grep -E "^  wg [01]:" "$log" | sed -E 's/ \(of Q.*//'
done
stamp done
