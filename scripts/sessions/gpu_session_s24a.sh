#!/usr/bin/env bash
# 2026-12-03 (twenty-fourth session): issue 5's ratios in repeated, order-balanced rounds instead of one stretch per
# kernel (scripts/bench.py --rounds; the single-round d128 16k FP8 / bf16 ratio read 1.45-1.55 over four runs):
# bench.py with the default and fast_exp2 FP8 rows, our bf16 and cuDNN at d128 / d256, 2k-16k, 7 rounds; FP8
# against our bf16 interleaved per call (bench_hopper_fp8.py, 15 rounds); cuDNN's FP8 beside the default and the
# fast_exp2 kernel (11 rounds each). Carry build and .whl.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s24a
export FA3NN_TRITON_AUTOTUNE=0
stamp bench
timeout 300 python scripts/bench.py --backends hopper-fp8 hopper-fp8-fast hopper cudnn --directions fwd --iters 5 \
    --rotate 2 --reps 5 --rounds 7 --out-dir "$out" --tag fp8rounds --headdims 128 256 \
    --seqlens 2048 4096 8192 16384 > "$out/bench.log" 2>&1
echo "bench rc $?"; grep -E "^\| [0-9]+ " "$out"/fp8rounds.md | cut -d"|" -f2-4,6,12,17,20,25,26,29,30 | head -n 20
stamp interleaved
timeout 120 python scripts/bench_hopper_fp8.py --json "$out/fp8_vs_bf16.json" --headdims 128 256 \
    --seqlens 4096 8192 16384 --iters 20 --reps 15 > "$out/fp8_vs_bf16.log" 2>&1
echo "interleaved rc $?"; sed -n '/^| /,$p' "$out/fp8_vs_bf16.log" | head -n 20
stamp cudnn
gpu_cudnn_fp8 120 --headdims 128 256 --seqlens 4096 8192 16384 --iters 10 --reps 11
mv "$out/cudnn_fp8.json" "$out/cudnn_fp8_default.json"; mv "$out/cudnn_fp8.log" "$out/cudnn_fp8_default.log"
gpu_cudnn_fp8 120 --headdims 128 --seqlens 4096 8192 16384 --iters 10 --reps 11 --variant fast_exp2
stamp done
