#!/usr/bin/env bash
# (Variant 57 was removed after these runs: no gain on issue 5's row; its patch is
# benchmarks/results/s25b-h200-20261204-0006/half_pv.patch.)
# 2026-12-03 (twenty-fifth session): issue 5's d128 causal 4k row against cuDNN's FP8 with the default and with
# variant 57 (key_block_256_half_pv), 15 rounds each, and the bf16 forward's d128 / d64 causal deal at 4k / 8k
# (default against one_section, more reps than s25b). Carry build and .whl.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s25c
stamp cudnn
gpu_cudnn_fp8 100 --headdims 128 --seqlens 4096 8192 --causal yes --iters 10 --reps 15
mv "$out/cudnn_fp8.json" "$out/cudnn_fp8_default.json"; mv "$out/cudnn_fp8.log" "$out/cudnn_fp8_default.log"
gpu_cudnn_fp8 100 --headdims 128 --seqlens 4096 8192 --causal yes --iters 10 --reps 15 --variant key_block_256_half_pv
stamp bf16deal
timeout 120 python scripts/bench_hopper.py --json "$out/bf16_deal.json" --headdims 64 128 \
    --seqlens 4096 8192 --iters 10 --reps 21 --ablation-seqlens --variants full one_section \
    > "$out/bf16_deal.log" 2>&1
echo "bf16 deal rc $?"; grep -E "\| yes \|" "$out/bf16_deal.log" | cut -d'|' -f2-7
stamp done
