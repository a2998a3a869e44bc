#!/usr/bin/env bash
# 2026-12-01: (1) the FP8 forward's P V wait (wgmma_wait_after, default) against plain_pv_wait and the previous
# build at 8k/16k with the rotated round order (bench_hopper.time_interleaved); (2) issue 7's llama-1b pair on one
# GPU with model.compile=true (fa3nn, sdpa; FP8 left out), to compare with the uncompiled pair of
# results/train-m128-h200x1-20261130-2335 (fa3nn 51,558, sdpa 51,290 tok/s). Needs build/libfa3nn_hopper.so,
# build/base/libfa3nn_hopper.so and the .whl/ wheels carried.
#
#   bash scripts/sessions/gpu_session_compile.sh [STEPS] [TRAIN_S]
set -u
steps=${1:-100}
train_s=${2:-480}
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-compile
gpu_wheels /tmp/site "*.whl"
stamp fp8
timeout 60 python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 256 --seqlens 8192 16384 \
    --reps 8 --iters 10 --variants plain_pv_wait --compare base=build/base/libfa3nn_hopper.so > "$out/fp8.log" 2>&1
echo "fp8 rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"
stamp training
mkdir -p "$out/one"
OVERRIDES="model.compile=true" FP8=0 OUT="$out/one" timeout "$train_s" bash scripts/gpu_scaling_run.sh 1 "$steps" \
    > "$out/one.log" 2>&1
echo "1 GPU rc $?"; tail -n 6 "$out/one.log"
stamp done
gpu_archive compile.tgz
