#!/usr/bin/env bash
# (Variant 57 lpt_deal was removed after this run: no gain; its patch is
# benchmarks/results/s25d-h200-20261204-0029/lpt_deal.patch.)
# 2026-12-04 (twenty-fifth session): FP8 variant 57 (lpt_deal: d128's 256-key default walking a host-built LPT
# table of tiles in its kernel parameters; model max/mean work 1.031 -> 1.004 at causal 2k-4k): bitwise against the
# default, timed beside it and one_section (interleaved, 15 reps), and beside cuDNN's FP8 (default and lpt_deal,
# 15 reps) at d128 causal 2k / 4k / 8k. Carry build and .whl.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s25d
stamp tests
gpu_pytest tests_lpt.log 150 tests/test_hopper_fp8.py -k "lpt_deal or causal_deals"
grep -E "^(FAILED|ERROR)" "$out/tests_lpt.log" | head -n 10
stamp ab
timeout 200 python scripts/bench_hopper_fp8.py --json "$out/lpt.json" --headdims 128 --block-k 768 \
    --seqlens 1024 2048 4096 8192 16384 --iters 20 --reps 15 --variants lpt_deal one_section > "$out/lpt.log" 2>&1
echo "ab rc $?"; sed -n '/^| /,$p' "$out/lpt.log" | cut -d'|' -f2-5,9-11
stamp cudnn
gpu_cudnn_fp8 100 --headdims 128 --seqlens 2048 4096 8192 --causal yes --iters 10 --reps 15
mv "$out/cudnn_fp8.json" "$out/cudnn_fp8_default.json"; mv "$out/cudnn_fp8.log" "$out/cudnn_fp8_default.log"
gpu_cudnn_fp8 100 --headdims 128 --seqlens 2048 4096 8192 --causal yes --iters 10 --reps 15 --variant lpt_deal
stamp done
