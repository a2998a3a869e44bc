#!/usr/bin/env bash
# 2026-12-01 (third session): is the 192-key FP8 d128 loop's skeleton limited by L2 -> shared-memory traffic? The
# microbenchmark (benchmarks/micro/fp8_chain.cu, results/fp8chain-h200-20261201-1100) runs the same GEMM pair from
# resident shared memory at 100% of the tensor rate (1536 clocks per pair of warpgroup blocks), the real kernel
# without its softmax at 62% (2485). Timing variants of one build: without K/V loads (17), without softmax and K/V
# loads (18), against the default and without softmax (11). All but the default compute WRONG outputs.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fp8kv192
stamp bench
timeout 200 python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 --seqlens 4096 16384 \
    --reps 8 --iters 10 --block-k 384 --variants key_block_192_skip_kv_loads key_block_192_skip_softmax \
    key_block_192_skip_softmax_and_kv_loads > "$out/fp8.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"
stamp clocks
timeout 100 python3 scripts/clock_probe.py --json "$out/clocks.json" --headdim 128 --fp8-variants \
    key_block_192_skip_kv_loads key_block_192_skip_softmax key_block_192_skip_softmax_and_kv_loads \
    --kernels fp8 fp8_key_block_192_skip_kv_loads fp8_key_block_192_skip_softmax \
    fp8_key_block_192_skip_softmax_and_kv_loads > "$out/clocks.log" 2>&1
echo "clocks rc $?"; sed -n '/^| kernel/,$p' "$out/clocks.log"
stamp done
gpu_archive fp8kv192.tgz
