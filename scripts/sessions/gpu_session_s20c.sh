#!/usr/bin/env bash
# 2026-12-03 (twentieth session), third call: why is each consumer warpgroup's warp 0 ~100-200 clocks behind its
# other warps per key block (s20b)? It shares its scheduler (SMSP 0) with the producer warp, and its lane 0 makes
# the K/V stage releases (the `leader`). Trace builds (benchmarks/results/s20c-*/ patches, compiled here, carried in
# build): fp8_trace_e1 with the releases made by warp 1 (thread 32), fp8_trace_e2 with the producer on warp 1 (SMSP
# 1), against the unpatched fp8_trace; 16k non-causal and 4k causal, default kernel. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s20c
for bin in fp8_trace fp8_trace_e1 fp8_trace_e2; do
    for args in "16384 0 0" "4096 1 0"; do
        log="$out/${bin}_${args// /_}.log"
        timeout 60 build/$bin $args > "$log" 2>&1
        echo "$bin $args rc $?"; grep -E "TFLOP" "$log"; sed -n '/^per warp/,$p' "$log" | grep -E "wg|spread" | \
            sed -E 's/K\/V wait [0-9]+ \| turn wait [0-9]+ \| //; s/\| to next top.*period/| period/; s/ \(of Q.*//'
    done
done
gpu_archive s20c.tar.gz
