#!/usr/bin/env bash
# 2026-12-03 (twentieth session), second call: the clock64 trace per warp (each consumer warp's lane 0; the trace
# recorded warp 0 of each warpgroup only until now). s20a's trace of the softmax turns (variant 43) had warpgroup 0's
# softmax at ~2090 clocks with no other softmax beside it and warpgroup 1's at ~1270: is one warp holding the
# warpgroup back? The default (0) and variant 43 at 16k non-causal, the default at 4k causal. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s20b
for args in "16384 0 0" "16384 0 43" "4096 1 0"; do
    timeout 60 build/fp8_trace $args > "$out/trace_${args// /_}.log" 2>&1
    echo "trace $args rc $?"; sed -n '/^phase/,$p' "$out/trace_${args// /_}.log"
done
gpu_archive s20b.tar.gz
