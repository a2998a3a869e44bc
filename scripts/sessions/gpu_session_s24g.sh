#!/usr/bin/env bash
# 2026-12-03 (twenty-fourth session): the FP8 default now deals d128 causal calls beyond 4096 query rows as one
# section over every tile (fp8_causal_deal; s24f: +3.9% at 8k). Issue 5's causal rows with it: cuDNN's FP8 beside
# the default (15 rounds) and bench.py --rounds 7 (FP8 kernel, our bf16, cuDNN). Carry build and .whl.
# (fp8_causal_deal was folded into flash_fwd_launch.cuh use_one_pair_sections in the review pass; same deals.)
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s24g
stamp tests
gpu_pytest tests_deal.log 120 tests/test_hopper_fp8.py -k "causal_deals or cross_tile"
stamp cudnn
gpu_cudnn_fp8 100 --headdims 128 --seqlens 4096 8192 16384 --causal yes --iters 10 --reps 15
stamp bench
timeout 120 python scripts/bench.py --backends hopper-fp8 hopper cudnn --directions fwd --iters 5 --rotate 2 \
    --reps 5 --rounds 7 --out-dir "$out" --tag fp8rounds --headdims 128 --seqlens 4096 8192 16384 --causal yes \
    > "$out/bench.log" 2>&1
echo "bench rc $?"; grep -E "^\| [0-9]+ " "$out"/fp8rounds.md | cut -d"|" -f2-4,6,11,14,19,20
stamp done
