#!/usr/bin/env bash
# 2026-12-01: what each part of the FP8 d128 forward's loop costs, from timing-only variants of one build
# (fa3nn.backends.hopper_fp8.VARIANTS; skip_* and direct_p compute wrong outputs): skip_softmax (no max/exp2/sum),
# direct_p (P fragments without quad shuffles), skip_kv_loads (no K/V TMA traffic), plain_pv_wait (the P V wait
# ptxas hoists). Rounds rotate their order (bench_hopper.time_interleaved).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fp8parts
timeout 150 python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 --seqlens 4096 8192 16384 \
    --reps 8 --iters 10 --variants skip_softmax direct_p skip_kv_loads plain_pv_wait > "$out/fp8.log" 2>&1
echo "fp8 rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"
gpu_archive fp8parts.tgz
