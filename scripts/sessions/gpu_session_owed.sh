#!/usr/bin/env bash
# 2026-12-01: (1) the FP8 forward with its O rescale moved between the Q K^T and P V issues (owed factor) - FP8 GPU
# suite, kernel-only timing against the previous build (build/prev) in the same run; (2) issue 7's llama-1b trio on
# one GPU, all compiled (model.compile=true): fa3nn, fa3nn with the FP8 per-tile recipe, sdpa.
#
#   bash scripts/sessions/gpu_session_owed.sh [STEPS] [TRAIN_S]
set -u
steps=${1:-80}
train_s=${2:-420}
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-owed
gpu_wheels /tmp/site "*.whl"
stamp tests
timeout 100 python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/test_hopper_fp8.py > "$out/tests.log" 2>&1
echo "tests rc $?"; gpu_log_summary "$out/tests.log"
stamp fp8
timeout 80 python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 256 --seqlens 4096 16384 \
    --reps 8 --iters 10 --compare prev=build/prev/libfa3nn_hopper.so > "$out/fp8.log" 2>&1
echo "fp8 rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"
stamp training
mkdir -p "$out/one"
OVERRIDES="model.compile=true" OUT="$out/one" timeout "$train_s" bash scripts/gpu_scaling_run.sh 1 "$steps" \
    > "$out/one.log" 2>&1
echo "1 GPU rc $?"; tail -n 6 "$out/one.log"
stamp done
gpu_archive owed.tgz
