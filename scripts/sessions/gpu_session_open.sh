#!/usr/bin/env bash
# The first device call of a session on one H200: (1) the whole GPU suite on main (the evening's host-launcher
# refactor ran on the CPU only), (2) cuDNN's FP8 forward against ours in the same run (scripts/bench_cudnn_fp8.py,
# per-tensor scales; needs .whl/nvidia_cudnn_frontend-*.whl carried), (3) our FP8 kernel with per-tile scales at
# d128/d256 (scripts/bench_hopper_fp8.py), so per-tile and per-tensor rates come from one run. One archive under $OUT.
#
#   bash scripts/sessions/gpu_session_open.sh [SUITE_S] [CUDNN_S] [FP8_S]
set -u
suite_s=${1:-180}
cudnn_s=${2:-240}
fp8_s=${3:-90}
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-open

timeout "$suite_s" python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/ > "$out/gpu_tests.log" 2>&1
echo "suite rc $?"; gpu_log_summary "$out/gpu_tests.log"

gpu_wheels /tmp/cudnnfe "nvidia_cudnn_frontend-*.whl"
timeout "$cudnn_s" python3 scripts/bench_cudnn_fp8.py \
    --json "$out/cudnn_fp8.json" > "$out/cudnn_fp8.log" 2>&1
echo "cudnn fp8 rc $?"; tail -n 24 "$out/cudnn_fp8.log"

timeout "$fp8_s" python3 scripts/bench_hopper_fp8.py --json "$out/fp8_pertile.json" --headdims 128 256 \
    --seqlens 4096 16384 > "$out/fp8_pertile.log" 2>&1
echo "fp8 per-tile rc $?"; tail -n 12 "$out/fp8_pertile.log"
gpu_archive open.tgz
