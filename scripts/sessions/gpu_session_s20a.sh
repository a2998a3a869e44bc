#!/usr/bin/env bash
# 2026-12-03 (twentieth session), first call: two schedules of d128's 256-key FP8 default (variant 37) that target
# its per-warpgroup chain (s19e trace: turn ~1000 clocks, of which the promotion's 64 FFMAs with the tensor cores
# idle; softmax ~2000, ~600 of it overlapping the other warpgroup's softmax on MUFU):
#   42 key_block_256_pv_halves: P V as two head-dim commit groups, the first half's promotion under the second GEMM;
#   43 key_block_256_softmax_turns: one warpgroup's softmax at a time (second named-barrier ring);
#   44 key_block_256_pv_halves_softmax_turns: both.
# Each output against the default's (expected max abs diff 0), kernel-only rates at 1k-16k (256-row K/V tiles), and
# the clock64 trace of each at 16k non-causal and 4k causal (build/fp8_trace compiled here with FA3NN_FP8_TRACE).
# Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s20a
for v in key_block_256_pv_halves key_block_256_softmax_turns key_block_256_pv_halves_softmax_turns; do
    timeout 60 python scripts/fp8_variant_exactness.py --variant $v --headdims 128 --seqlens 1024 16384 \
        --block-k 256 > "$out/exact_$v.log" 2>&1
    echo "exact $v rc $?"; tail -n 4 "$out/exact_$v.log"
done
stamp native
gpu_fp8_bench rates 240 --headdims 128 --seqlens 1024 2048 4096 8192 16384 --block-k 256 --reps 5 \
    --variants key_block_256_pv_halves key_block_256_softmax_turns key_block_256_pv_halves_softmax_turns
stamp trace
for args in "16384 0 0" "16384 0 42" "16384 0 43" "16384 0 44" "4096 1 0" "4096 1 42"; do
    timeout 60 build/fp8_trace $args > "$out/trace_${args// /_}.log" 2>&1
    echo "trace $args rc $?"; grep -E "TFLOP|wg [0-9]:" "$out/trace_${args// /_}.log"
done
stamp done
gpu_archive s20a.tar.gz
