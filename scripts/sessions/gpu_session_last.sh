#!/usr/bin/env bash
# The evening session's last device call on one H200 (2026-11-30): (1) the whole GPU suite on the final tree (FP8
# fold reverted, in-kernel GQA backward on, the varlen FP8 routing test), (2) FP8 end to end at seqlen 16384,
# d128/d256 (scripts/bench.py), (3) issue 7's llama-1b run on one GPU, 30 steps (scripts/gpu_scaling_run.sh 1 30;
# needs the datasets wheels of .whl/ installed first). One archive under $OUT.
#
#   bash scripts/sessions/gpu_session_last.sh [SUITE_S] [E2E_S] [TRAIN_S]
set -u
suite_s=${1:-150}
e2e_s=${2:-90}
train_s=${3:-300}
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-last

timeout "$suite_s" python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/ > "$out/gpu_tests.log" 2>&1
echo "suite rc $?"; gpu_log_summary "$out/gpu_tests.log"

timeout "$e2e_s" python scripts/bench.py --backends hopper-fp8 hopper cudnn --directions fwd --headdims 128 256 \
    --seqlens 16384 --causal both --reps 5 --out-dir "$out" --tag fp8-e2e > "$out/fp8_e2e.log" 2>&1
echo "fp8 e2e rc $?"; sed -n '/^| hdim/,$p' "$out/fp8-e2e.md" 2>/dev/null

OUT="$out/scaling" timeout "$train_s" bash scripts/gpu_scaling_run.sh 1 30 > "$out/scaling.log" 2>&1
echo "llama-1b 1 GPU rc $?"; tail -n 8 "$out/scaling.log"
gpu_archive last.tgz  # only the archive travels back
