#!/usr/bin/env bash
# 2026-12-03 (nineteenth session), fifth call: the clock64 trace of the new default (integer row max, split S) and of
# the float split S (variant 34), with the turn's K stage wait timed on its own (event 8): the s19a trace gave the
# "Q K^T issue" phase 228-271 clocks per 256-key block, more than eight wgmma issues should take. build/fp8_trace
# compiled here (FA3NN_FP8_TRACE), carried with build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s19e
for args in "16384 0 0" "16384 0 34" "4096 1 0" "4096 1 34"; do
    timeout 60 build/fp8_trace $args > "$out/trace_${args// /_}.log" 2>&1
    echo "trace $args rc $?"; grep -E "TFLOP|wg [0-9]:" "$out/trace_${args// /_}.log"
done
gpu_archive s19e.tar.gz
