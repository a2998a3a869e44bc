#!/usr/bin/env bash
# 2026-12-03 (nineteenth session), second call. (1) benchmarks/micro/pipe_probe.cu: do the tensor cores and MUFU
# slow each other when both are busy, and what 3-input integer max (VIMNMX3) costs. (2) The row max from integer
# maxes on the score bits (variants key_block_256_split_s_int_max = 37, fused_turn_w3_int_max = 38,
# fused_turn_int_max = 39 (d256's default form), three_consumers_int_max = 40 (d64's)): same output as
# the float tree (max abs diff, expected 0), then timed beside the default and fused_turn_w3, kernel only, 256-row
# K/V tiles. (3) The same for the bf16 forward (variant int_max = 10). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s19b
nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -use_fast_math -I kernels/hopper -o /tmp/pipe_probe \
    benchmarks/micro/pipe_probe.cu > "$out/nvcc_probe.log" 2>&1 || tail -n 5 "$out/nvcc_probe.log"
timeout 60 /tmp/pipe_probe > "$out/pipe_probe.txt" 2>&1; echo "probe rc $?"
grep -E "imax3|concurrent|softmax" "$out/pipe_probe.txt"
stamp exact
for pair in "key_block_256_split_s_int_max key_block_256_split_s 128" "fused_turn_w3_int_max fused_turn_w3 128" \
            "fused_turn_int_max fused_turn 256" "three_consumers_int_max three_consumers 64"; do
    set -- $pair
    timeout 90 python scripts/fp8_variant_exactness.py --variant $1 --against $2 --headdims $3 \
        --seqlens 1024 16384 --block-k 256 > "$out/exact_$1.log" 2>&1
    echo "exact $1 rc $?"; tail -n 6 "$out/exact_$1.log"
done
stamp native
gpu_fp8_bench intmax 240 --headdims 128 --seqlens 2048 4096 8192 16384 --block-k 256 --reps 5 \
    --variants key_block_256_split_s key_block_256_split_s_int_max fused_turn_w3 fused_turn_w3_int_max
for hv in "64 three_consumers_int_max" "256 fused_turn_int_max"; do
    set -- $hv
    gpu_fp8_bench "intmax_d$1" 100 --headdims $1 --seqlens 2048 8192 16384 --block-k 256 --reps 5 --variants $2
done
stamp bf16
timeout 60 python scripts/hopper_variant_exactness.py --variant int_max --headdims 64 128 256 \
    --seqlens 1024 4096 > "$out/exact_bf16.log" 2>&1
echo "exact bf16 rc $?"; tail -n 1 "$out/exact_bf16.log"
timeout 150 python scripts/bench_hopper.py --json "$out/bf16_intmax.json" --headdims 64 128 256 \
    --seqlens 2048 8192 16384 --variants full int_max --ablation-seqlens --reps 5 > "$out/bf16_intmax.log" 2>&1
echo "bf16 rc $?"; sed -n '/^| hdim/,$p' "$out/bf16_intmax.log"
stamp done
gpu_archive s19b.tar.gz
