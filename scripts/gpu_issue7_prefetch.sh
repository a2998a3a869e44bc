#!/usr/bin/env bash
# Issue 7, 2 GPUs with FSDP2 after the data prefetch thread (data.prefetch_steps, default 2): fa3nn and SDPA on the
# gpu_issue7_pair.sh config, to see whether the ~12 s data stall near step 42 is gone. Needs .whl/ datasets wheels.
#
#   bash scripts/gpu_issue7_prefetch.sh [STEPS] [TWO_S]
set -u
steps=${1:-60}
two_s=${2:-330}
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-issue7b
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$out/pip.log" 2>&1 || echo "wheel install failed: $(tail -n 2 "$out/pip.log")"
export PYTHONPATH=/tmp/site:$PYTHONPATH NCCL_NVLS_ENABLE=0
FP8=0 OUT="$out" timeout "$two_s" bash scripts/gpu_scaling_run.sh 2 "$steps" > "$out/two.log" 2>&1
echo "2 GPU rc $?"; tail -n 6 "$out/two.log"
grep -ho "step *[0-9]* |.*tok/s [0-9,]*" "$out"/*2gpu.log | head -n 16
gpu_archive issue7b.tgz
